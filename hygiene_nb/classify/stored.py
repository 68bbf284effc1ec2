"""The classification kept beside its snapshot: computed once, reused while its inputs stay.

A snapshot's verdicts depend on the snapshot (fixed once written), the classification code and
built-in rules, the user's rules, and the protection facts read outside the snapshot (git's
tracked files, the homes, the store, what protects the root from above; keep markers are in the
snapshot itself, the valid CACHEDIR.TAG files in its scan's metadata), and, when a user rule
has an age condition, on the time it is measured at.
``classification_key`` hashes all of these; the verdicts are kept in
``classified/host=…/root=…/scan=…/<key>.parquet``, one row per snapshot row in the snapshot's
own order and row groups, and read back while the key is the same. A new key replaces the old
file; pruning the snapshot removes the directory.

Never a cache that authorizes anything: ``make_plan`` classifies afresh, and the plan and the
executor re-check every candidate on disk. A file that cannot be read or does not match its
snapshot (rows, columns) is computed again; a store that cannot be written gives the verdicts
without keeping them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hygiene_nb.classify.classification import VERDICT_SCHEMA
from hygiene_nb.classify.protect import ProtectContext
from hygiene_nb.classify.rules import UserRule
from hygiene_nb.errors import StoreError
from hygiene_nb.scan.index import ScanInfo, classified_dir
from hygiene_nb.scan.snapshot import read_parquet
from hygiene_nb.store import Store, make_private_dir, remove_store_path, write_private_file

__all__ = [
    "classification_key",
    "depends_on_time",
    "keep_classification",
    "kept_classification",
    "kept_git_parents",
    "read_verdicts",
]

# The classification's own code: every module of this package the kept columns are computed
# by (the verdicts, and what each directory holds: ``content``, counting an inode once as
# ``summary.counted_once`` does), so editing a built-in rule, a protection or the content
# share changes the key. A test holds it to classification.py's imports in this package.
_CODE = (
    "classification.py",
    "content.py",
    "protect.py",
    "rules.py",
    "stored.py",
    "summary.py",
)
_KEY_VERSION = 1
# The directories that hold a ``.git`` entry, as the snapshot lists them: a fact of the snapshot
# (fixed once written), kept in the footer of each file of verdicts, so that finding the key
# of a snapshot classified before reads one footer, not the snapshot's names.
_GIT_PARENTS = b"hygiene_nb.git_parents"


@functools.cache
def _code_digest() -> str:
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in _CODE:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    return h.hexdigest()


def depends_on_time(user_rules: Sequence[UserRule]) -> bool:
    """Whether the verdicts change with the time they are measured at (an age condition)."""
    return any(rule.min_age_days is not None for rule in user_rules)


def _sorted_digest(values: frozenset[str]) -> str:
    h = hashlib.sha256()
    for value in sorted(values):
        h.update(value.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def classification_key(
    ctx: ProtectContext, user_rules: Sequence[UserRule], now_ns: int | None
) -> str:
    """The digest of everything a snapshot's verdicts rest on besides the snapshot itself.

    ``now_ns`` counts only when a user rule has an age condition (``depends_on_time``).
    """
    above = ctx.above_root
    payload = {
        "version": _KEY_VERSION,
        "code": _code_digest(),
        "root": ctx.root,
        "home": ctx.home,
        "store": ctx.store,
        "homes": sorted(ctx.other_homes),
        "keep_dirs": sorted(ctx.keep_dirs),
        "above_root": None if above is None else [above.rule, above.claim],
        "cache_tags": [list(tag) for tag in ctx.cache_tags],
        "git": {
            "worktrees": list(ctx.git.worktrees),
            "tracked": _sorted_digest(ctx.git.tracked),
            "unreadable": sorted(ctx.git.unreadable),
            "note": ctx.git.note,
        },
        "user_rules": [
            {k: getattr(v, "value", v) for k, v in dataclasses.asdict(rule).items()}
            for rule in user_rules
        ],
        "now_ns": now_ns if depends_on_time(user_rules) else None,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


def kept_classification(store: Store, info: ScanInfo, key: str, rows: int) -> Path | None:
    """The file keeping the verdicts of ``key`` for a snapshot of ``rows`` rows, if fit to use.

    Only its footer is read: a file that is absent, damaged or of another shape is None.
    """
    path = classified_dir(store, info) / f"{key}.parquet"
    try:
        footer = pq.read_metadata(path)
    except (OSError, pa.ArrowException):
        return None
    if footer.num_rows != rows or footer.schema.to_arrow_schema() != VERDICT_SCHEMA:
        return None
    return path


def kept_git_parents(store: Store, info: ScanInfo) -> list[str] | None:
    """The parents of the snapshot's ``.git`` entries, as a kept file of verdicts records them.

    None when no file is kept, or none records them (kept by an earlier version): the snapshot
    says then (``scan.snapshot.named_rows``).
    """
    for path in sorted(classified_dir(store, info).glob("*.parquet")):
        try:
            raw = (pq.read_metadata(path).metadata or {}).get(_GIT_PARENTS)
            found = None if raw is None else json.loads(raw)
        except (OSError, pa.ArrowException, ValueError):
            continue
        if isinstance(found, list) and all(isinstance(p, str) for p in found):
            return found
    return None


def keep_classification(
    store: Store,
    info: ScanInfo,
    key: str,
    verdicts: pa.Table,
    *,
    group_rows: int,
    git_parents: Sequence[str],
) -> Path | None:
    """Keep ``verdicts`` (``classify_verdicts`` of a whole snapshot, in file order) under ``key``.

    Written atomically, in the snapshot's row groups, with ``git_parents`` (the parents of the
    snapshot's ``.git`` entries: ``kept_git_parents``) in its footer; the files of earlier keys
    are removed. Returns the file, or None when the store cannot be written (the verdicts are
    then only in memory: nothing fails because of it).
    """
    path = classified_dir(store, info) / f"{key}.parquet"
    sink = io.BytesIO()
    # The few distinct words (risk, rule…) are dictionary pages; numbers are written plain.
    # Only the numbers get statistics: the queries join this file row for row with the
    # snapshot, so no filter on a word could skip a row group of it.
    words = [f.name for f in verdicts.schema if pa.types.is_dictionary(f.type)]
    numbers = [f.name for f in verdicts.schema if f.name not in words]
    facts = {_GIT_PARENTS: json.dumps(list(git_parents), ensure_ascii=False).encode()}
    pq.write_table(
        verdicts.replace_schema_metadata(facts),
        sink,
        compression="zstd",
        row_group_size=max(1, group_rows),
        use_dictionary=words,
        write_statistics=numbers,
    )
    try:
        make_private_dir(path.parent)
        write_private_file(path, sink.getvalue())
    except StoreError:
        return None
    for other in path.parent.glob("*.parquet"):
        if other.name != path.name:
            with contextlib.suppress(StoreError):  # removed with the snapshot, at the latest
                remove_store_path(store, other)
    return path


def read_verdicts(path: Path) -> pa.Table:
    """The verdicts kept at ``path`` (``VERDICT_SCHEMA``; see ``kept_classification``)."""
    return read_parquet(path)
